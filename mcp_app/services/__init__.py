"""Services: the only code that writes rows or enqueues work (HackSoft services/selectors)."""
