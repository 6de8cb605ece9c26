"""The engine's time manager (play/timeman.py) on a fake clock with fake search steps: no step
starts that would end past the limit, BatchSize shrinks when time runs short, and the margin is
the user's reserve, not taken from movetime."""
from types import SimpleNamespace

import pytest

from azshogi.play.timeman import GoLimits, StepTimer, TimePlan, next_step, parse_go, plan


def progress(nodes=0, best=0.0, second=0.0):
    return SimpleNamespace(nodes=nodes, best_visits=best, second_visits=second)


def fake_step(leaves, slowdown=1.0):
    """A CPU forward pass of a 10x192 network: about 0.45 s at 32 leaves."""
    return slowdown * (0.02 + 0.0135 * leaves)


def calibrated():
    timer = StepTimer()
    # The first step of each size pays for warm-up: the fastest of each size counts.
    timer.calibrate([(1, 0.2), (32, fake_step(32) * 3), (1, fake_step(1)), (32, fake_step(32)), (32, fake_step(32))])
    return timer


def fast_step(leaves):
    """A small network on a GPU: many short steps."""
    return 0.001 + 0.0005 * leaves


def think(time_plan, timer, batch=32, start=0.0, slowdown=1.0, decisive=False, step=fake_step):
    """Runs a search on the fake clock; returns (end time, step sizes)."""
    clock, nodes, sizes = start, 0, []
    while True:
        best = nodes if decisive else nodes / 2
        leaves = next_step(time_plan, clock, progress(nodes, best, nodes - best), timer, batch)
        if leaves == 0:
            return clock, sizes
        seconds = step(leaves) * slowdown
        clock += seconds
        timer.observe(leaves, seconds)
        nodes += leaves
        sizes.append(leaves)


def test_calibration_fits_the_line_through_the_fastest_steps():
    timer = calibrated()
    assert timer.fixed == pytest.approx(0.02) and timer.per_leaf == pytest.approx(0.0135)
    assert timer.predict(16) == pytest.approx(fake_step(16))
    one_size = StepTimer()
    one_size.calibrate([(8, 0.4), (8, 0.2)])
    assert one_size.predict(4) == pytest.approx(0.1)  # one size only: time grows with the leaves


@pytest.mark.parametrize("byoyomi", [1000, 3000])
def test_no_step_ends_past_the_limit_and_the_batch_shrinks(byoyomi):
    time_plan = plan(parse_go(f"btime 0 wtime 0 byoyomi {byoyomi}".split()), True, 40, 300)
    assert time_plan.limit == pytest.approx((byoyomi - 300) / 1000)
    end, sizes = think(time_plan, calibrated(), start=0.05)  # 50 ms went to the mate search
    assert end <= time_plan.limit
    assert sizes[0] == 32 and sizes[-1] < 32  # the last step was made to fit
    assert time_plan.limit - end < 1.25 * fake_step(1) + 0.01  # and little time was left unused


def test_a_step_slower_than_predicted_makes_the_next_predictions_slower():
    timer = calibrated()
    before = timer.predict(32)
    timer.observe(32, 1.5 * before)
    assert timer.predict(32) == pytest.approx(1.5 * before)
    timer.observe(32, before)  # one fast step does not undo it at once
    assert before < timer.predict(32) < 1.5 * before
    time_plan = plan(parse_go("byoyomi 1000".split()), True, 0, 300)
    end, _ = think(time_plan, calibrated(), slowdown=1.2)  # every pass 20% slower than calibrated
    assert end <= time_plan.limit


def test_nothing_starts_when_not_even_one_leaf_fits():
    time_plan = plan(parse_go("byoyomi 100".split()), True, 0, 300)  # 10 ms: the minimum
    assert next_step(time_plan, 0.0, progress(), calibrated(), 32) == 0
    assert next_step(None, 5.0, progress(), calibrated(), 32) == 32  # no clock: a full batch


def test_movetime_is_thought_in_full_without_the_margin():
    time_plan = plan(parse_go("movetime 300".split()), True, 0, 300)
    assert time_plan == TimePlan(0.3, 0.3, exact=True)
    end, sizes = think(time_plan, StepTimer(0.001, 0.0005), batch=8, decisive=True, step=fast_step)
    assert 0.285 <= end <= 0.3  # no early stop although one move takes every visit


def test_clock_budgets_stop_early_when_the_best_move_is_decided():
    time_plan = plan(parse_go("btime 600000 wtime 600000 byoyomi 1000".split()), True, 40, 300)
    assert time_plan.target < time_plan.limit
    decided, _ = think(time_plan, StepTimer(0.001, 0.0005), batch=8, decisive=True, step=fast_step)
    close, _ = think(time_plan, StepTimer(0.001, 0.0005), batch=8, step=fast_step)
    # Every visit on one move: the second cannot catch up before the target after half of it.
    assert decided < 0.51 * time_plan.target
    assert time_plan.target <= close <= 2 * time_plan.target + 0.01  # unsure: thinks on, up to twice


def test_pondering_steps_leave_room_for_a_ponderhit_at_any_moment():
    time_plan = plan(parse_go("ponder btime 0 wtime 0 byoyomi 500".split()), True, 0, 300)  # limit 0.2 s
    timer = calibrated()
    leaves = next_step(time_plan, 30.0, progress(100), timer, 32, pondering=True)
    assert 0 < leaves < 32 and 1.25 * timer.predict(leaves) <= time_plan.limit


def test_malformed_go_arguments_are_named_and_left_out():
    limits = parse_go("btime 1000 wtime x byoyomi abc binc -5 nodes".split())
    assert (limits.btime, limits.wtime, limits.byoyomi, limits.binc, limits.nodes) == (1000, None, None, None, None)
    assert [e.split(":")[0] for e in limits.errors] == ["go wtime x", "go byoyomi abc", "go binc -5", "go nodes"]
    assert parse_go("byoyomi btime 500".split()).btime == 500  # a missing value does not eat the next word
    mate = parse_go("mate soon".split())
    assert mate.mate == 0 and "mate soon" in mate.errors[0]
    assert parse_go(["mate"]).mate == parse_go("mate infinite".split()).mate == -1
    assert GoLimits(movetime=5).has_clock and not GoLimits(nodes=5).has_clock
    odd = parse_go("btime \u00b2 wtime 1000".split())  # '²' is a digit to str.isdigit, not to int()
    assert (odd.btime, odd.wtime) == (None, 1000) and odd.errors[0].startswith("go btime \u00b2")


def test_a_margin_that_leaves_no_time_is_kept_and_said():
    """byoyomi 300 with TimeMargin 300: the margin stays (a late move loses the game), and the
    plan's note tells the GUI why the move comes without search."""
    squeezed = plan(parse_go(["byoyomi", "300"]), True, 0, 300)
    assert squeezed.limit == pytest.approx(0.01)  # the minimum thinking time: the network's move
    assert squeezed.note.startswith("the clock allows 300 ms for this move and TimeMargin keeps 300 ms of it")
    assert plan(parse_go(["byoyomi", "300"]), True, 0, 100).note == ""
    assert plan(parse_go(["movetime", "300"]), True, 0, 300).note == ""  # the margin is not taken from movetime


@pytest.mark.parametrize("black_to_move", [True, False])
def test_each_side_thinks_on_its_own_clock_and_increment(black_to_move):
    """The side to move spends its own main time and increment, never the other side's: with one
    side's increment (or main time) far larger, only that side's budget grows."""
    mine, theirs = ("b", "w") if black_to_move else ("w", "b")
    even = plan(parse_go(f"btime 60000 wtime 60000 {mine}inc 0 {theirs}inc 0".split()), black_to_move, 40, 0)
    my_increment = plan(parse_go(f"btime 60000 wtime 60000 {mine}inc 10000 {theirs}inc 0".split()),
                        black_to_move, 40, 0)
    their_increment = plan(parse_go(f"btime 60000 wtime 60000 {mine}inc 0 {theirs}inc 10000".split()),
                           black_to_move, 40, 0)
    their_time = plan(parse_go(f"{theirs}time 600000 {mine}time 60000 binc 0 winc 0".split()), black_to_move, 40, 0)
    assert my_increment.target == pytest.approx(even.target + 10.0)
    assert their_increment.target == pytest.approx(even.target)
    assert their_time.target == pytest.approx(even.target) and their_time.limit == pytest.approx(even.limit)
