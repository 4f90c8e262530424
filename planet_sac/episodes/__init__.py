"""Episode files on disk (`storage`: one file's format), a run's episode folder (`folder`), and the streaming replay
that reads folders (`loader`)."""

from planet_sac.episodes.folder import EpisodeFolder, list_episodes
from planet_sac.episodes.loader import ChunkInfo, EpisodeReplay, make_dataset
from planet_sac.episodes.storage import (
    BadEpisodeError,
    EpisodeSpec,
    episode_filename,
    episode_length,
    load_episode,
    save_episode,
    validate_episode,
)

__all__ = [
    "BadEpisodeError",
    "ChunkInfo",
    "EpisodeFolder",
    "EpisodeReplay",
    "EpisodeSpec",
    "episode_filename",
    "episode_length",
    "list_episodes",
    "load_episode",
    "make_dataset",
    "save_episode",
    "validate_episode",
]
