"""The one unit of work: a step's protocol, the engines that do its work (Beam graphs and
the driver, torch jobs) and the runner. May import pipelines.beam, trainers, transforms."""
