"""Agent episodes: the ``episodes`` dataset kind and table rows
(:mod:`~resources.agents.episodes`), tool environments (:mod:`~resources.agents.environments`)
and the live episode loop (:mod:`~resources.agents.runner`).
"""

from resources.agents.episodes import (
    FORMATS,
    TAU_BENCH_WRITE_TOOLS,
    EpisodeRecord,
    detect_format,
    read_episodes,
    tasks_of,
    EpisodesDataset,
    episode_id,
    episode_row,
    episode_scoring_inputs,
    has_episodes,
)
from resources.agents.environments import EnvironmentLoadError, tool, ToolEnvironment, load_environment
from resources.agents.runner import (
    STOP,
    DEFAULT_MAX_TURNS,
    CALL_FORMAT,
    ScriptedUser,
    USER_PROMPT,
    ModelUser,
    USERS,
    run_episode,
)

__all__ = [
    "FORMATS",
    "TAU_BENCH_WRITE_TOOLS",
    "EpisodeRecord",
    "detect_format",
    "read_episodes",
    "tasks_of",
    "EpisodesDataset",
    "episode_id",
    "episode_row",
    "episode_scoring_inputs",
    "has_episodes",
    "EnvironmentLoadError",
    "tool",
    "ToolEnvironment",
    "load_environment",
    "STOP",
    "DEFAULT_MAX_TURNS",
    "CALL_FORMAT",
    "ScriptedUser",
    "USER_PROMPT",
    "ModelUser",
    "USERS",
    "run_episode",
]
