"""kubetune suggestion algorithm: the process that fills a Suggestion with assignments."""
