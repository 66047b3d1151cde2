"""What keeps personal data out of what a run stores (masking of emails and phone numbers), and
which targets a run may send browsers to (`_ssrf.py`)."""
