"""What every request goes through: auth, parameters, answers, errors."""
