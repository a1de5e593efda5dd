"""Developer tools: the throwaway Redis, the local stack of `make up`."""
