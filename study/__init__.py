"""`make study`: Synthetic Users' main job, and the demo shop it studies."""
