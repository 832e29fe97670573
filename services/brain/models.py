"""Which adapter answers a session's `config.model`: `scripted:<policy>` or a Claude model."""

from __future__ import annotations

from wakeline_brain.metrics import TimedModel
from wakeline.agent.model import Model, ModelError
from wakeline_brain.scripted import PACKAGED_POLICIES, ScriptedModel, load_policy
from wakeline_brain.settings import BrainSettings


class ModelRegistry:
    def __init__(self, settings: BrainSettings):
        self._settings = settings
        self._models: dict[str, Model] = {}
        if settings.anthropic_api_key:
            # A brain that can call Claude imports the SDK at start, as it always did: its
            # sessions' first model call after a wake should not wait for it. One that cannot
            # (scripted models only) never pays it (see `_build`).
            import wakeline_brain.claude  # noqa: F401

    def model_for(self, name: str) -> Model:
        if name not in self._models:
            self._models[name] = TimedModel(self._build(name))
        return self._models[name]

    def _build(self, name: str) -> Model:
        if name.startswith("scripted:"):
            directory = self._settings.policy_dir or PACKAGED_POLICIES
            return ScriptedModel(load_policy(directory, name.split(":", 1)[1]))
        if not self._settings.anthropic_api_key:
            raise ModelError(f"model {name!r} needs ANTHROPIC_API_KEY; set it or use a scripted:<policy> model")
        # Imported here, not at the module's top: the SDK's import is most of a brain's
        # start-up (~2 of 3 s on a busy machine), and a restarted brain's sessions wait for its
        # start (issue 37, docs/reliability.md "Run 25"); with a key it is imported at start.
        from wakeline_brain.claude import ClaudeModel

        return ClaudeModel(name, self._settings.anthropic_api_key, self._settings.anthropic_base_url,
                           self._settings.anthropic_max_retries, prompt_cache=self._settings.anthropic_prompt_cache)

    async def close(self) -> None:
        for model in self._models.values():
            close = getattr(model, "close", None)
            if close:
                await close()
