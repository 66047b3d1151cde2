"""What keeps personal data out of what a run stores: masking of emails and phone numbers."""
