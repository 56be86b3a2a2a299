"""The dashboard under /ui: server-rendered pages over the same use cases as REST."""
