"""`nmtpipe refresh`: parts, vocabulary and encodings as steps, the checks across a version's
parts, and training and decoding on the latest version. May import the workflow's steps."""
