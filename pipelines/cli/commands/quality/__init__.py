"""The commands that judge a prepared dataset's pairs again after `prepare`: rethreshold
(other thresholds, without the corpus) and score (a model score for rethreshold)."""
