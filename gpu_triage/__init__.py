"""gpu-triage: a rule-based incident expert system for NVIDIA GPU nodes."""

__version__ = "0.1.0"
