"""Running Beam: pipeline options and runners, the graphs of transforms.beam assembled and
run as one pipeline, and Beam's start-up for the command line. May import transforms only."""
