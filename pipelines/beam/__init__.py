"""The Beam graphs: named PTransform composites of the DoFns in transforms.beam, and how
a pipeline is run (options, runners). May import transforms; never workflow or cli."""
