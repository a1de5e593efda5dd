"""The webhook endpoints of a key, and which endpoints hear of a job."""
