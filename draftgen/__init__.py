"""draftgen: generate EAGLE-3 drafter training data with SGLang, declaratively.

This package holds what the operator and the local runner share (the API model, the plan, the
budget logic, the status fold) and the local control plane used by `make demo` and the tests.
"""
