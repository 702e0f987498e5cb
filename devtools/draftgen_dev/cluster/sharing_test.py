import threading
import time

from draftgen_dev.cluster.sharing import ClusterTurns


def in_thread(turn, said: list, what: str, hold_s: float) -> threading.Thread:
    def run():
        with turn():
            said.append(f"{what} in")
            time.sleep(hold_s)
            said.append(f"{what} out")
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_shared_turns_overlap_and_one_alone_waits_for_them_and_the_later_shared_wait_behind_it(tmp_path):
    turns, said = ClusterTurns(tmp_path), []
    first = [in_thread(ClusterTurns(tmp_path).shared, said, f"shared {i}", 0.6) for i in range(2)]
    time.sleep(0.2)
    alone = in_thread(ClusterTurns(tmp_path).alone, said, "alone", 0.3)
    time.sleep(0.2)
    later = in_thread(turns.shared, said, "later", 0.0)
    for thread in (*first, alone, later):
        thread.join(5)
    assert set(said[:2]) == {"shared 0 in", "shared 1 in"}  # together
    assert said[4:] == ["alone in", "alone out", "later in", "later out"]


def test_a_shared_turn_waits_while_another_process_is_alone_and_goes_once_it_ends(tmp_path):
    holder = ClusterTurns(tmp_path).alone()
    holder.__enter__()
    waiting = in_thread(ClusterTurns(tmp_path).shared, said := [], "shared", 0.0)
    time.sleep(0.2)
    assert said == []
    holder.__exit__(None, None, None)
    waiting.join(5)
    assert said == ["shared in", "shared out"]
