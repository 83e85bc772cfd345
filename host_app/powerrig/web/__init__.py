"""The results web page (`powerrig serve --db URL`): a read-only view of a results database for the
morning after and for a lab with many rigs: runs per rig, steps with their figures and verdicts,
throughput-per-watt curves per plan and drive, two runs compared, and each running rig's live state."""
