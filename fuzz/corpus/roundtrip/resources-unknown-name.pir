def @f() {
  resource<(1,), f32>(r7)
}

resources {
  r0 = "0000803f";
}
