"""import prism (and prism.train.torch) keeps what a step frees (one malloc arena, high
thresholds), set at import on every rank, unless the user set malloc up or asked for glibc's
default (prism/_malloc.py)."""
import prism
import prism.train.torch as ptt


def test_import_prism_set_them_for_every_task():
    assert prism._MALLOC_SET == {"arena_max": 1, "mmap_threshold": 32 << 20, "trim_threshold": 1 << 30}


def test_the_import_set_one_arena_and_high_thresholds():
    assert ptt._MALLOC_SET == {"arena_max": 1, "mmap_threshold": 32 << 20, "trim_threshold": 1 << 30}


def test_a_users_malloc_settings_or_the_opt_out_are_left_alone(monkeypatch):
    monkeypatch.setenv("PRISM_TRAIN_MALLOC", "default")
    assert ptt._keep_freed_memory() == {}
    monkeypatch.delenv("PRISM_TRAIN_MALLOC")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert ptt._keep_freed_memory() == {}
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")
    assert ptt._keep_freed_memory() == {}
    monkeypatch.delenv("GLIBC_TUNABLES")
    monkeypatch.setenv("PRISM_MALLOC", "default")
    assert ptt._keep_freed_memory() == {}
