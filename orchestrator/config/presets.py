"""Provider presets: OpenAI-compatible servers known by name (pure data, no SDK).

The team loader resolves a preset to a base URL and a key variable; the client factory
(`orchestrator.llm.factory`) reads the same table, so config never depends on the factory.
"""

from __future__ import annotations

# OpenAI-compatible providers: preset name -> (base URL, env var holding the key; None = no key).
PRESETS: dict[str, tuple[str, str | None]] = {
    "grok": ("https://api.x.ai/v1", "XAI_API_KEY"),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "together": ("https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    "cerebras": ("https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"),
    "vllm": ("http://127.0.0.1:8000/v1", None),
    "ollama": ("http://127.0.0.1:11434/v1", None),
    "lmstudio": ("http://127.0.0.1:1234/v1", None),
}
# Presets that run on the operator's machine: free, and no key needed.
LOCAL_PRESETS = frozenset({"vllm", "ollama", "lmstudio"})
