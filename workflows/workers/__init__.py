"""Worker runtime: the step runner, the django-q2 cluster, the scanners and the sweeper,
the schedules, the executors and the routes a worker serves."""
