"""The dashboard under `/ui`: server-rendered pages over the same services as the REST API
(routes, pages, session and CSRF, inline SVG charts), its templates and static files."""
