"""What runs where: the command line (cli/), the driver steps and workflow (workflow/), running
Beam (beam/), usage errors (usage.py). May import trainers and transforms; nothing imports it."""
