"""Episode files on disk and the streaming replay that reads them."""

from planet_sac.episodes.loader import ChunkInfo, EpisodeReplay, make_dataset
from planet_sac.episodes.storage import (
    BadEpisodeError,
    EpisodeSpec,
    episode_filename,
    list_episodes,
    load_episode,
    save_episode,
    validate_episode,
)

__all__ = [
    "BadEpisodeError",
    "ChunkInfo",
    "EpisodeReplay",
    "EpisodeSpec",
    "episode_filename",
    "list_episodes",
    "load_episode",
    "make_dataset",
    "save_episode",
    "validate_episode",
]
