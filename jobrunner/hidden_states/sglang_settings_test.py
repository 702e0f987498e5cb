import pytest

from jobrunner.hidden_states.sglang_settings import capture_indices, capture_server_args, check_capture_layers, \
    kept_server_args

SERVER = ["--quantization", "fp8", "--mem-fraction-static", "0.85", "--host", "0.0.0.0", "--enable-metrics",
          "--api-key=k", "--enable-hierarchical-cache", "--trust-remote-code"]


def test_the_servers_own_flags_are_kept_and_those_that_only_serve_are_dropped():
    assert kept_server_args(SERVER) == ["--quantization", "fp8", "--mem-fraction-static", "0.85",
                                        "--trust-remote-code"]


@pytest.mark.parametrize("flag", ["--chunked-prefill-size", "--chunked_prefill_size=4096", "--speculative-algorithm",
                                  "--dtype", "--pp-size"])
def test_a_flag_that_changes_what_a_forward_returns_is_refused_by_name(flag):
    with pytest.raises(ValueError, match=f"server flag {flag.split('=')[0].replace('_', '-')} cannot be used"):
        kept_server_args([flag, "1"] if "=" not in flag else [flag])


def test_capture_mode_turns_off_what_loses_rows_and_names_the_layers():
    args = capture_server_args("/m", [1, 30, 57], "bf16", 8, SERVER, 64)
    assert args[:4] == ["--model-path", "/m", "--dtype", "bfloat16"]
    for pair in (["--tp-size", "8"], ["--chunked-prefill-size", "-1"], ["--max-running-requests", "64"],
                 ["--speculative-algorithm", "EAGLE3"]):
        assert any(args[i:i + 2] == pair for i in range(len(args))), pair
    assert "--disable-radix-cache" in args and args[-4:] == ["--return-aux-hidden-state-layer-ids", "1", "30", "57"]


def test_the_users_tensor_parallel_and_request_pool_flags_win():
    args = capture_server_args("/m", [1], "fp8", 8, ["--tp", "4", "--max-running-requests", "16"], 64)
    assert args.count("--tp-size") == 0 and args[args.index("--tp") + 1] == "4"
    assert args[args.index("--max-running-requests") + 1] == "16" and args[3] == "bfloat16"  # fp8: computed in bf16


def test_layer_k_is_captured_as_the_input_of_layer_k_plus_1_and_the_last_layer_cannot_be():
    assert capture_indices([0, 3, 6]) == [1, 4, 7]
    check_capture_layers([1, 3, 6], 8)
    with pytest.raises(ValueError, match="aux layer 7 is the model's last decoder layer"):
        check_capture_layers([1, 3, 7], 8)


def test_on_the_cpu_a_memory_fraction_is_given_unless_the_flags_give_one():
    args = capture_server_args("/m", [1], "bf16", 1, ["--device", "cpu"], 8)
    assert args[args.index("--mem-fraction-static") + 1] == "0.5"
    mine = capture_server_args("/m", [1], "bf16", 1, ["--device", "cpu", "--mem-fraction-static", "0.3"], 8)
    assert mine.count("--mem-fraction-static") == 1
    assert "--mem-fraction-static" not in capture_server_args("/m", [1], "bf16", 8, [], 8)  # a GPU: SGLang's own
