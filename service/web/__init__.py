"""The dashboard under `/ui`: server-rendered pages over the same use cases as REST (routes,
pages, session and CSRF), its templates and static files."""
