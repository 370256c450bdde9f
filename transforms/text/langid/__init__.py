"""Is a line in the language its side declares: letters per script, function words, then a
model (lingua). May import the rest of transforms.text, storage and errors; no Beam."""
