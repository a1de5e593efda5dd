"""What every request goes through: auth, the gate, parameters, answers, errors."""
