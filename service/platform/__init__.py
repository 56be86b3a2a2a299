"""What every feature stands on and none owns: the supervised background loop, the request
guards, server-rendered SVG charts, and local state kept private to the service's user.
"""
