"""What data becomes: text (text/), vocabularies (vocab/), file formats (formats/),
storage (storage/), and the Beam wrappers around them (beam/). Never imports torch or
pipelines; only transforms.beam imports Beam."""
