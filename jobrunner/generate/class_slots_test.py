from draftgen_contracts.prompt_classes import PromptClass
from jobrunner.generate.class_slots import footprint, may_take_slot

SHORT = PromptClass(name="short", max_prompt_tokens=2048, concurrency=150, max_new_tokens=10_240)
LONG = PromptClass(name="long", max_prompt_tokens=None, concurrency=32, max_new_tokens=16_384)
CLASSES = {"short": SHORT, "long": LONG}
CONTEXT = 32_768


def test_a_footprint_is_the_longest_prompt_and_response_within_the_context():
    assert footprint(SHORT, CONTEXT) == 12_288 and footprint(LONG, CONTEXT) == CONTEXT


def test_a_class_under_its_concurrency_always_may():
    assert may_take_slot(LONG, CLASSES, {"short": 150, "long": 31}, idle_classes=(), context_length=CONTEXT)


def test_a_full_class_waits_while_the_other_class_may_still_send():
    assert not may_take_slot(LONG, CLASSES, {"short": 0, "long": 32}, idle_classes=(), context_length=CONTEXT)


def test_an_idle_class_lends_its_memory_and_no_more():
    lent = 150 * 12_288 // CONTEXT  # 56 long requests hold what 150 short ones may
    assert may_take_slot(LONG, CLASSES, {"short": 0, "long": 32 + lent - 1}, ("short",), CONTEXT)
    assert not may_take_slot(LONG, CLASSES, {"short": 0, "long": 32 + lent}, ("short",), CONTEXT)


def test_an_idle_class_lends_only_what_its_requests_still_in_flight_leave():
    # 100 short requests are still out (their dataset cut or stopped): they keep their memory.
    lent = 50 * 12_288 // CONTEXT  # 18
    assert may_take_slot(LONG, CLASSES, {"short": 100, "long": 32 + lent - 1}, ("short",), CONTEXT)
    assert not may_take_slot(LONG, CLASSES, {"short": 100, "long": 32 + lent}, ("short",), CONTEXT)
