"""Running a project on Docker: bring-up, observed status, ordering, image pulls, health checks, networks and data
files."""
