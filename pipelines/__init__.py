"""What runs where: the Beam graphs (beam/), the driver steps and workflow (workflow/),
the command line (cli/). May import trainers and transforms; nothing imports pipelines."""
