"""Date and time formats of every page (FORMAT_MODULE_PATH): one format across the admin, the
audit pages and the live tail, the audit's ``2026-11-26 06:00:01 UTC``."""
