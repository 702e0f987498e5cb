from jobrunner.hidden_states.extraction_settings import ExtractionSettings


def test_settings_that_cannot_run_are_named_before_any_weight_loads():
    assert ExtractionSettings(("train",)).problem() is None
    assert "too-long policy 'cut'" in ExtractionSettings(("train",), too_long="cut").problem()
    assert "final state 'last'" in ExtractionSettings(("train",), final_state="last").problem()
    assert ExtractionSettings(("train",), max_len=512, max_batch_tokens=256).problem() == (
        "max_len 512 exceeds max_batch_tokens 256: a sample must fit a batch")
