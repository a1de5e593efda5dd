-- UTC calendar arithmetic for the budgets of chatq/admission/limits_*.lua (Lua in Redis has no
-- os.date). Days are counted from 1970-01-01; the civil-date conversions are Howard
-- Hinnant's algorithms (proleptic Gregorian calendar).

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m > 2) and (m - 3) or (m + 9)
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
                          - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = (mp < 10) and (mp + 3) or (mp - 9)
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m, d
end

-- The month of day number `day`: its index (year * 12 + month - 1) and the unix seconds at
-- which it begins and ends.
local function month_of(day)
  local y, m = civil_from_days(day)
  local next_y, next_m = y, m + 1
  if next_m == 13 then next_y, next_m = y + 1, 1 end
  return y * 12 + m - 1, days_from_civil(y, m, 1) * 86400,
         days_from_civil(next_y, next_m, 1) * 86400
end

-- A bucket that holds `cap` and refills `cap` per minute, continuously: its level at `t`,
-- from the level `lvl` it had at `at` (full when never used).
local function level(cap, lvl, at, t)
  if cap <= 0 then return 0 end
  if not lvl then return cap end
  return math.min(cap, tonumber(lvl) + (t - tonumber(at)) * cap / 60)
end
