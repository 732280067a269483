"""manage.py commands: seed_demo."""
