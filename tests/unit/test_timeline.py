"""The demo's timeline (beekeeper/timeline.py): phases timed by their ends, and each pyinfra
operation's wall time read off its output as the lines came."""

from beekeeper.timeline import Timeline, operation_walls

# pyinfra's output of a deploy (the demo's own log, cut), with the second each line came
DEPLOY = [
    (0.0, "--> Beginning operation run...\n"),
    (0.5, "--> Starting operation: Create the build folder \n"),
    (0.6, "    [sandbox] Success\n"),
    (0.9, "--> Starting operation: Build server image beekeeper/llama-server:lcp0.3.36-cpu "
          "(log: /var/log/beekeeper/build.log) \n"),
    (30.9, "[sandbox] [beekeeper] building beekeeper/llama-server:lcp0.3.36-cpu: 30 s\n"),
    (361.4, "    [sandbox] Success\n"),
    (361.5, "--> Starting operation: Place model gemma-3-270m-q4_k_m.gguf \n"),
    (364.0, "    [sandbox] No changes\n"),
]


def test_each_operation_lasts_from_its_start_line_to_the_next_ones():
    walls = dict(operation_walls(DEPLOY))
    assert list(walls) == [
        "Create the build folder",
        "Build server image beekeeper/llama-server:lcp0.3.36-cpu (log: "
        "/var/log/beekeeper/build.log)",
        "Place model gemma-3-270m-q4_k_m.gguf"]
    assert round(walls["Create the build folder"], 6) == 0.4
    assert round(sum(s for n, s in walls.items() if n.startswith("Build server image")),
                 6) == 360.6
    assert round(walls["Place model gemma-3-270m-q4_k_m.gguf"], 6) == 2.5  # to the last line


def test_no_operation_no_wall():
    assert list(operation_walls([(1.0, "--> Loading config...\n")])) == []


def test_phases_are_timed_from_the_previous_end_and_the_total_adds_them():
    ticks = iter([100.0, 130.0, 130.0, 560.0])
    line = Timeline(clock=lambda: next(ticks))
    line.add("controller and Docker set-up", 75)
    assert line.end("sandbox host up") == 30
    assert line.end("source and model fetched") == 0
    assert line.end("deploy") == 430
    assert line.text() == ("timeline: controller and Docker set-up 75 s | sandbox host up "
                           "30 s | source and model fetched 0 s | deploy 430 s | total 535 s")
