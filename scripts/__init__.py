"""Developer tooling behind dev.py: throwaway services and the run command's ASGI app."""
