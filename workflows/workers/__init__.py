"""Worker runtime: the step runner, the django-q2 cluster, scanners, the sweeper, schedules, executors and routing."""
