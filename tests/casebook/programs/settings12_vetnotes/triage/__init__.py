"""Clinic-note triage: synthetic visit records, their rendered notes and the note featurizer."""
