"""Test helpers shared by several test directories (not tests themselves)."""
