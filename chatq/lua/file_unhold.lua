-- An upload ended without a file (refused, cut, or its request failed): its hold gives its
-- room in the key's quota back. ARGV: owner, upload id. Answers 1.
release_file_hold(ARGV[1], ARGV[2])
return 1
