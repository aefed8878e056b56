"""swarmrl: reinforcement learning from collective rewards for teams of LLM agents."""

__version__ = "0.1.0"
