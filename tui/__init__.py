"""The responder's terminal UI (Textual). Loaded only by ``gpu-triage tui``."""
