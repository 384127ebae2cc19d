"""The pull dialog's fit check: the verdict from the registry (a FAKE registry on loopback,
tests/fakes/registry_server.py, serving real GGUF files) is shown before the download,
and a model that cannot fit is pulled only after the user says yes. Beside the FAKE
Ollama with Spark-like probes (61 GiB available)."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from sparkctl.tui.widgets.model_dialogs import ConfirmDialog, PullDialog
from sparkctl.tui.widgets.pull_view import PullProgressView
from tests.fakes.ollama_server import pull_scenario
from tests.tui.models_helpers import SIZE, build, info, open_models, settle


@pytest.fixture
def fake(spark_fake):
    spark_fake.state = pull_scenario()
    return spark_fake


async def ask_pull(app, pilot, name: str) -> None:
    await pilot.press("p")
    await pilot.pause()
    assert isinstance(app.screen, PullDialog)
    app.screen.query_one(Input).value = name
    await pilot.press("enter")
    await settle(app, pilot)


async def test_a_model_that_cannot_fit_is_asked_about_before_the_download(fake, registry, huge_kv_gguf, tmp_path):
    registry.state.add_model("library/qwen3:8b", gguf=huge_kv_gguf)
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        await ask_pull(app, pilot, "qwen3:8b")
        assert isinstance(app.screen, ConfirmDialog)
        question = str(app.screen.query_one("#confirm-question").render())
        assert "qwen3:8b cannot fit here" in question and "does not fit: needs " in question
        await pilot.press("n")
        await settle(app, pilot)
        assert fake.calls("/api/pull") == []
        shown = info(screen)
        assert "remote: from the registry manifest and GGUF header" in shown and "KV cache 128.0 GiB" in shown
        await ask_pull(app, pilot, "qwen3:8b")
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await settle(app, pilot)
        assert len(fake.calls("/api/pull")) == 1
        assert screen.query_one(PullProgressView).last.outcome == "success"


async def test_a_model_that_fits_shows_its_verdict_and_pulls(fake, registry, smol_gguf, tmp_path):
    registry.state.add_model("library/qwen3:8b", gguf=smol_gguf)
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        await ask_pull(app, pilot, "qwen3:8b")
        assert not isinstance(app.screen, ConfirmDialog)
        assert "qwen3:8b: fits: needs " in info(screen)
        assert len(fake.calls("/api/pull")) == 1
        assert screen.query_one(PullProgressView).last.outcome == "success"


async def test_w_says_whether_a_model_would_fit_without_pulling_it(fake, registry, huge_kv_gguf, smol_gguf,
                                                                    tmp_path):
    """Issue 30: "would X fit?" could only be asked by starting a pull. w names a model and
    shows its verdict from the registry; nothing is pulled, whatever the verdict."""
    registry.state.add_model("library/qwen3:8b", gguf=huge_kv_gguf)
    registry.state.add_model("library/smollm2:135m", gguf=smol_gguf)
    app = build(fake, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_models(app, pilot)
        for name, verdict in (("qwen3:8b", "does not fit: needs "), ("smollm2:135m", "fits")):
            await pilot.press("w")
            await pilot.pause()
            assert isinstance(app.screen, PullDialog)
            app.screen.query_one(Input).value = name
            await pilot.press("enter")
            await settle(app, pilot)
            assert not isinstance(app.screen, ConfirmDialog)  # no "pull anyway?"
            shown = info(screen)
            assert screen.query_one("#model-info").border_title == f"Fit {name} (from its registry; nothing pulled)"
            assert "remote: from the registry manifest and GGUF header" in shown and verdict in shown, shown
        assert fake.calls("/api/pull") == []
