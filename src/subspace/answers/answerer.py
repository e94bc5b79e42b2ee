"""Which chat model writes the answers: an OpenAI-compatible one when one is configured, else
the offline answerer that quotes the workspace's own sentences."""

from __future__ import annotations

import logging

from subspace.answers.fake_chat import FakeChat
from subspace.config import Settings
from subspace.providers.chat import ChatProvider
from subspace.providers.registry import provider_name

log = logging.getLogger(__name__)


def create_chat_provider(settings: Settings) -> ChatProvider:
    """The chat model answers come from: the server at SUBSPACE_CHAT_URL when set (embeddings
    stay with their provider), or with PROVIDERS=openai (or unset with OPENAI_API_KEY) the
    OpenAI-compatible one; otherwise FakeChat, which answers by quoting, since no local chat
    model ships. Build it once per process: it logs which one is active."""
    name = provider_name(settings)
    if settings.chat_url or name == "openai":
        from subspace.providers.openai_chat import OpenAIChat

        chat: ChatProvider = OpenAIChat(settings)
        log.info("chat provider: %s (model %s)", chat.name, chat.model)
        return chat
    log.warning(
        "No chat model configured (PROVIDERS=%s): answers quote the workspace's own sentences "
        "(extractive). Set SUBSPACE_CHAT_URL to an OpenAI-compatible server (a local Ollama: "
        "http://localhost:11434/v1) and SUBSPACE_CHAT_MODEL, or PROVIDERS=openai with "
        "OPENAI_API_KEY, for written answers.",
        name,
    )
    return FakeChat()
