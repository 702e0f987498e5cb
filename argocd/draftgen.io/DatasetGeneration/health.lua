-- Argo CD health of a DatasetGeneration (draftgen.io/v1alpha1), from its status:
--   Healthy      phase Succeeded, and the operator has seen the current spec;
--   Degraded     phase Failed, with the Failed condition's message;
--   Suspended    phase Suspended (spec.suspend): gitops-engine pkg/health's status for resources
--                that are suspended or paused;
--   Progressing  everything else: no status yet, the operator behind the spec (observedGeneration),
--                Pending, Generating, Merging, Extracting.
-- Written for gopher-lua (Lua 5.1), as Argo CD runs it; tested in tests/argocd/test_health.py.
local hs = {}

local function condition(status, type_)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

-- "Phase: Reason: message" from the Ready condition, the reason left out where it repeats the phase.
local function told(status)
  local text = status.phase
  local ready = condition(status, "Ready")
  if ready == nil then
    return text
  end
  if ready.reason ~= nil and ready.reason ~= "" and ready.reason ~= status.phase then
    text = text .. ": " .. ready.reason
  end
  if ready.message ~= nil and ready.message ~= "" then
    text = text .. ": " .. ready.message
  end
  return text
end

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the draftgen operator to observe the object"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the draftgen operator to observe generation " .. generation
  return hs
end

if status.phase == "Failed" then
  local failed = condition(status, "Failed")
  hs.status = "Degraded"
  hs.message = failed ~= nil and (failed.message or "") or "Failed"
  return hs
end

if status.phase == "Suspended" then
  hs.status = "Suspended"
  hs.message = told(status)
  return hs
end

if status.phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = told(status)
  return hs
end

hs.status = "Progressing"
hs.message = told(status)
return hs
