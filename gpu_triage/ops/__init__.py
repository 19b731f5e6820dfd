"""The consumers floor: everything that uses findings. Unattended runs and their history,
exporters and reports, fleet analytics, integrations (node-problem-detector, Slurm), the
runbook step runner and the headless incident session that the TUI drives."""
